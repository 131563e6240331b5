"""The thin surfaces over the engine: the CLI (`cli` + `commands/`), the MCP server
(`server`, behind the standard-library stdio front `stdio`), `osk quickstart`.
"""
