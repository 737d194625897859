from coord.cli import main

raise SystemExit(main())
