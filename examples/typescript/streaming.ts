// Stream a long command's output line by line as it is printed.
//
//   node dist/streaming.js
import { Sandbox } from '@hutch/sdk';

const start = performance.now();
let partial = ''; // a chunk may end in the middle of a line

function onStdout(text: string): void {
  const lines = (partial + text).split('\n');
  partial = lines.pop() ?? '';
  for (const line of lines) console.log(`[${((performance.now() - start) / 1000).toFixed(2).padStart(5)}s] ${line}`);
}

await using sb = await Sandbox.create();
const result = await sb.commands.run('for i in 1 2 3 4 5; do echo step $i of 5; sleep 0.5; done; echo finished', {
  onStdout,
  onStderr: (text) => void process.stdout.write(`stderr: ${text}`),
});
console.log(`exit ${result.exitCode} after ${result.durationMs.toFixed(0)} ms`);

// the same as an async iterator of {kind, data} events, ending with the result
for await (const { kind, data } of sb.commands.stream(['sh', '-c', 'echo out; echo err >&2; exit 3'])) {
  if (kind === 'exit') console.log('exit code', data.exitCode);
  else console.log(kind, JSON.stringify(new TextDecoder().decode(data)));
}
