"""Control flow: IF, WHILE, CALL_ONCE and the resource variables they share."""
