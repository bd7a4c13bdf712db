"""Serving a trained model over HTTP, in OpenAI's chat-completions protocol.

:mod:`~clustertune.serve.protocol` reads requests and writes answers and errors in OpenAI's shapes;
:mod:`~clustertune.serve.engine` draws answers from one loaded model (transformers' continuous
batching, or one request at a time where a seed or log-probabilities ask for it);
:mod:`~clustertune.serve.app` is the FastAPI app; :mod:`~clustertune.serve.server` loads the model
and serves it on the socket :mod:`~clustertune.serve.listen` binds. Needs the ``serve`` extra (FastAPI and uvicorn). :mod:`~clustertune.serve.tinker`
adds the Tinker training API (``--tinker``; the ``tinker`` extra).
"""
