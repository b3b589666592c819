"""Monitors: a search configuration watched on a schedule, its quality judged run after run
and alerts raised only when a drop is real (docs/monitors.md)."""
