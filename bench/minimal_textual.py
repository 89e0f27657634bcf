"""The floor of a Textual program's first frame on this machine: one line of text, nothing
else (run it under ptybench next to gputui: the difference is gputui's own start-up)."""

from textual.app import App, ComposeResult
from textual.widgets import Static


class Minimal(App[None]):
    def compose(self) -> ComposeResult:
        yield Static("GPU 0  NVIDIA H100 80GB HBM3  0%  0 MiB")


if __name__ == "__main__":
    Minimal().run()
