"""The code interpreter (e2b-code-interpreter) on hutch's code contexts."""
import os

import pytest


def test_state_is_kept_between_runs(ci):
    ci.run_code("x = 40")
    assert ci.run_code("x + 2").text == "42"


def test_stdout_stderr_and_callbacks(ci):
    out = []
    ex = ci.run_code("import sys\nprint('hello')\nprint('oops', file=sys.stderr)", on_stdout=lambda m: out.append(m.line))
    assert "".join(ex.logs.stdout) == "hello\n"
    assert "".join(ex.logs.stderr) == "oops\n"
    assert "".join(out) == "hello\n"


def test_errors(ci):
    ex = ci.run_code("1 / 0")
    assert ex.error is not None
    assert ex.error.name == "ZeroDivisionError"
    assert "division by zero" in ex.error.value
    assert "ZeroDivisionError" in ex.error.traceback


def test_rich_result(ci):
    ex = ci.run_code(
        "class Table:\n"
        "    def _repr_html_(self):\n"
        "        return '<table><tr><td>1</td></tr></table>'\n"
        "Table()"
    )
    main = [r for r in ex.results if r.is_main_result]
    assert len(main) == 1
    assert main[0].html == "<table><tr><td>1</td></tr></table>"
    assert "html" in main[0].formats()


def test_contexts(ci):
    ctx = ci.create_code_context()
    ci.run_code("y = 'in the new context'", context=ctx)
    assert ci.run_code("y", context=ctx).text == "'in the new context'"
    assert ci.run_code("'y' in dir()").text == "False"
    assert ctx.id in [c.id for c in ci.list_code_contexts()]
    ci.restart_code_context(ctx)
    assert ci.run_code("'y' in dir()", context=ctx).text == "False"
    ci.remove_code_context(ctx)
    assert ctx.id not in [c.id for c in ci.list_code_contexts()]


def test_javascript(ci):
    assert ci.run_code("1 + 2", language="js").text == "3"


def test_env_vars_for_one_execution(ci):
    code = "import os\nprint(os.environ.get('MY_VAR'))"
    assert ci.run_code(code, envs={"MY_VAR": "it's \"set\""}).logs.stdout == ["it's \"set\"\n"]
    assert ci.run_code(code).logs.stdout == ["None\n"]
    js = ci.create_code_context(language="js")
    assert ci.run_code("process.env.MY_VAR", context=js, envs={"MY_VAR": "js"}).text == "'js'"
    assert ci.run_code("process.env.MY_VAR === undefined", context=js).text == "true"


def test_unsupported_language_names_itself(ci):
    from e2b.exceptions import SandboxException

    with pytest.raises(SandboxException, match="language 'r'"):
        ci.run_code("1", language="r")


def test_the_interpreter_needs_the_access_token(ci):
    import urllib.error
    import urllib.request

    req = urllib.request.Request(
        os.environ["E2B_SANDBOX_URL"] + "/contexts",
        headers={"E2b-Sandbox-Id": ci.sandbox_id, "E2b-Sandbox-Port": "49999"},
    )
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req)
    assert e.value.code == 401
