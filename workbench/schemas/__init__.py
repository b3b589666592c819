"""What the workbench reads from requests and how it writes values back: request JSON parsed as
OpenSearch parses it, request bodies as marshmallow schemas (``body.load`` turns a body's first
error into the 400 with the plugin's reason), bounded numbers, text rules, and Java's number
formatting. Pure: no I/O."""
