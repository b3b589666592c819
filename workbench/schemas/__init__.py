"""What the workbench reads from requests and how it writes values back: request JSON parsed as
OpenSearch parses it, bounded numbers, text rules, and Java's number formatting. Pure: no I/O."""
