"""What the workbench tells operators about itself: log set-up and redaction (``logs``) and the
plugin's SRW event counters kept in Redis (``event_stats``).

Not to be confused with ``workbench.metrics``, which scores rankings.
"""
