"""Edit planners: pure functions `(text, spec) -> text`, one module per file kind."""
