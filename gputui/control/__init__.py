"""Acting on the machine: sending signals to processes (no UI here)."""
