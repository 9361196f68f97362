from porter.cli import main

raise SystemExit(main())
