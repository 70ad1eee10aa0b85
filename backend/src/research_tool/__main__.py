from research_tool.cli import main

raise SystemExit(main())
