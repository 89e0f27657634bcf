#!/usr/bin/env bash
# Where gputui's start-up time goes on this machine: interpreter, imports, first frame.
#   bench/startup_profile.sh PTYBENCH
pb=$1
t() { local s=$(date +%s.%N); "$@" > /dev/null 2>&1; echo "$(echo "$(date +%s.%N) - $s" | bc) s: $*"; }
python3 -m compileall -q "$(python3 -c 'import textual,os;print(os.path.dirname(os.path.dirname(textual.__file__)))')" gputui > /dev/null 2>&1
for i in 1 2; do t python3 -c pass; t python3 -c "import textual.app"; t python3 -c "import gputui.ui.app"; done
python3 "$pb" --seconds 6 --json -- python3 -m gputui --demo
python3 "$pb" --seconds 6 --json -- python3 -m gputui
python3 "$pb" --seconds 6 --json -- python3 -m nvitop --interval 1
