"""Monitors: a search configuration evaluated on a schedule, with alerts a team can trust."""
