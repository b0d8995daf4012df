// An agent's loop: snippets run one after another in a persistent Python interpreter, each
// building on the state the previous ones left (variables, imports, functions).
//
//   node dist/agent_loop.js
import { Sandbox } from '@hutch/sdk';

const snippets = [
  'import statistics\nprices = [12.5, 13.1, 12.9, 14.2, 13.8]',
  "def spread(xs):\n    return max(xs) - min(xs)\nprint('mean', statistics.mean(prices))",
  'round(spread(prices), 2)',
];

await using sb = await Sandbox.create();
const ctx = await sb.contexts.create('python');
for (const [i, code] of snippets.entries()) {
  const ex = await ctx.run(code);
  if (ex.error) {
    console.log(`step ${i + 1}: ${ex.error.name}: ${ex.error.value}`);
    break;
  }
  console.log(`step ${i + 1}: stdout=${JSON.stringify(ex.stdout)} result=${JSON.stringify(ex.text)}`);
}

// an error comes back as data, and the state survives it
const ex = await ctx.run('prices[10]');
console.log('error:', ex.error?.name ?? null, '| still there:', (await ctx.run('len(prices)')).text);
