from coord.cli.main import main

raise SystemExit(main())
