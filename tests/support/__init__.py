"""What the tests share, one module per concern, imported as ``tests.support.<module>`` (never from a conftest):

* :mod:`~tests.support.paths` — the checkout, the shared data beside it, the golden files, the bundled dataset;
* :mod:`~tests.support.datasets` — small dataset folders written on the spot, the tiny dataset, the handed cases;
* :mod:`~tests.support.runs` — a small run in this process, and the one reader of a run's published rows;
* :mod:`~tests.support.profiles` — the hypothesis profiles and :func:`~tests.support.profiles.examples`;
* :mod:`~tests.support.figures` — figures a test measures, printed once at the end of the session;
* :mod:`~tests.support.pace` — deadlines scaled by the machine's pace, and patient waits;
* :mod:`~tests.support.chat_server` — a scripted chat-completions server on 127.0.0.1;
* :mod:`~tests.support.importers`, :mod:`~tests.support.redaction`, :mod:`~tests.support.rules`,
  :mod:`~tests.support.viewer` — the helpers of those packages' tests.
"""
