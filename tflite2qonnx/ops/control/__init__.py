"""Control flow: IF, WHILE, CALL_ONCE, STABLEHLO_COMPOSITE and the resource variables they
share."""
