"""Solvers for two-player games (SPEC §9), on the ``Node`` protocol and on normal-form games.

- ``tree``: the ``Node`` protocol, ``EagerNode`` (trees from rule tables) and ``flatten``;
- ``best_response``: best response, NashConv (general-sum) and exploitability (zero-sum);
- ``cfr``: CFR and CFR+ (vectorised, bit-identical to OpenSpiel's) and the reference recursion;
- ``matrix``: regret matching, replicator dynamics, CCE, zero-sum Nash, Nash bargaining;
- ``psro``: Policy-Space Response Oracles over simulated or exact meta-games.
"""
