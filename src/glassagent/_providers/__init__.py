"""Provider adapters: each translates the neutral types to one wire format and back."""
