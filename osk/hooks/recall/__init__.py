"""Per-prompt recall, the hook's half: for each prompt the person types, the vault's few nodes
that answer it (or, when none does, captured rounds), injected before the model sees it, and
nothing when nothing answers with confidence.

- ``per_prompt``: the decision (ranked over the recall file or asked of the server, the gate's
  floors, what every shown node must pass, the block within the host's budget, the receipt);
  ``osk recall why`` runs the same ``decide``;
- ``channel``: asks the session's running MCP server to rank, over a Unix socket.

Beside the index, in the search wing: what a hit is and how sure (``osk.search.recall_hits``),
what the two halves of the channel share (``osk.search.recall_wire``) and the server's half
(``osk.search.recall_server``). A hit's markers follow the engine's rule
(``osk.provenance.markers``). The hook path imports the standard library and these light
modules only.
"""
