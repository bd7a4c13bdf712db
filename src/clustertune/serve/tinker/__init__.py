"""The Tinker training API (Thinking Machines' SDK, ``tinker`` on PyPI, the version pinned in the
``tinker`` extra) served by ``clustertune serve --tinker`` under ``/api/v1``.

It owns the protocol (:mod:`.routes`, :mod:`.wire`), the service's clients, samplers and their
state on disk (:mod:`.service`, :mod:`.store`), the one line of work (:mod:`.work`), and what the
calls do to the weights (:mod:`.lora`, :mod:`.losses`). Like the rest of ``serve``, it runs on the
node side and imports nothing of ``launch``, ``api`` or ``cli`` (the layer contract); where a server is
started as a run, its directory reaches it through ``$CLUSTERTUNE_RUN_DIR``.
"""
