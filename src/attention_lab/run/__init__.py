"""What runs around training: command-line checks, run dirs, resume, signals, sweep summaries, and the
failure policy of the task function. Light at import (no torch, no Lightning): config errors are quick."""
