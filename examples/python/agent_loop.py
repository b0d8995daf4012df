"""An agent's loop: snippets run one after another in a persistent Python interpreter, each
building on the state the previous ones left (variables, imports, functions).

    python3 examples/python/agent_loop.py
"""

from hutch import Sandbox

snippets = [
    "import statistics\nprices = [12.5, 13.1, 12.9, 14.2, 13.8]",
    "def spread(xs):\n    return max(xs) - min(xs)\nprint('mean', statistics.mean(prices))",
    "round(spread(prices), 2)",
]

with Sandbox.create() as sb:
    ctx = sb.contexts.create("python")
    for step, code in enumerate(snippets, 1):
        ex = ctx.run(code)
        if ex.error:
            print(f"step {step}: {ex.error.name}: {ex.error.value}")
            break
        print(f"step {step}: stdout={ex.stdout!r} result={ex.text!r}")

    # an error comes back as data, and the state survives it
    ex = ctx.run("prices[10]")
    print("error:", ex.error.name if ex.error else None, "| still there:", ctx.run("len(prices)").text)
