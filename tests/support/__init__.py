"""Test support code shared by the integration and end-to-end suites.

* :mod:`tests.support.waiting`  - ``wait_until``: poll a condition with a deadline.
* :mod:`tests.support.mock_llm` - ``MockLLM``: scripted OpenAI-compatible provider (aiohttp).
* :mod:`tests.support.opencode` - ``OpencodeServe``: a throw-away ``opencode serve`` bound to the mock.
"""
