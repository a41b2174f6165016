"""adt.py - the constructors of the prelude's algebraic data types (List, Option, Tree, nat),
for the builder and for `match` in @rly.script: Cons, Nil, Some, Nothing (Relay's None), Rose,
zero, succ. Constructor(name) makes one of a type a module defines."""
from .expr import Cons, Constructor, Nil, Nothing, Rose, Some, succ, zero

__all__ = ["Cons", "Constructor", "Nil", "Nothing", "Rose", "Some", "succ", "zero"]
