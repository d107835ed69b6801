"""Research built on stratagem that is not part of the library: the drills (short SFT chats
that each show one decision), the Deal or No Deal claim probe, and the recipes of documented
runs. Run from the repository root: ``python -m experiments.drills``,
``python -m experiments.claim_probe``; ``stratagem`` never imports this package."""
