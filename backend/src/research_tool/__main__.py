from research_tool.cli import entry

entry()
