"""Online A/B tests by team-draft interleaving: definitions, serving, impressions and the verdict
(docs/ab-tests.md)."""
