"""CLI sub-commands, one module each, discovered by archsim.cli (a module defines ``register``)."""
