// The stock `@e2b/code-interpreter` npm package against `hutch serve --e2b` (scripts/test-e2b.sh).
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { Sandbox } = require('@e2b/code-interpreter')

test('run_code keeps state and returns stdout, errors and rich results', async () => {
  const sbx = await Sandbox.create()
  try {
    await sbx.runCode('x = 40')
    const two = await sbx.runCode('x + 2')
    assert.equal(two.text, '42')
    const out = []
    const printed = await sbx.runCode("print('hi from js')", { onStdout: (m) => out.push(m.line) })
    assert.deepEqual(printed.logs.stdout, ['hi from js\n'])
    assert.equal(out.join(''), 'hi from js\n')
    const err = await sbx.runCode('1 / 0')
    assert.equal(err.error.name, 'ZeroDivisionError')
    const html = await sbx.runCode("class T:\n    def _repr_html_(self):\n        return '<b>x</b>'\nT()")
    assert.equal(html.results[0].html, '<b>x</b>')
    const ctx = await sbx.createCodeContext({ language: 'js' })
    assert.equal((await sbx.runCode('6 * 7', { context: ctx })).text, '42')
  } finally {
    await sbx.kill()
  }
})
