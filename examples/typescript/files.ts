// A sandbox that lives across several steps: write files into it, work on them, list and read
// the results back.
//
//   node dist/files.js
import { Sandbox } from '@hutch/sdk';

const sb = await Sandbox.create({ ttlSeconds: 600, metadata: { example: 'files' } });
try {
  console.log(`sandbox ${sb.id} expires at ${sb.expiresAt} (unix ms)`);
  await sb.files.makeDir('/workspace/data');
  await sb.files.write('/workspace/data/numbers.csv', 'n\n1\n2\n3\n');
  const blob = Uint8Array.from({ length: 256 }, (_, i) => i);
  await sb.files.write('/workspace/data/blob.bin', blob);
  await sb.files.write(
    '/workspace/sum.py',
    "import csv\nprint(sum(int(r['n']) for r in csv.DictReader(open('data/numbers.csv'))))\n",
  );

  // a later step: the files are still there
  const result = await sb.commands.run(['python3', 'sum.py']);
  console.log('sum:', result.stdout.trim());
  await sb.commands.run('sort -r data/numbers.csv > data/reversed.csv');

  for (const entry of await sb.files.list('/workspace/data')) {
    console.log(`  ${entry.kind.padEnd(4)} ${String(entry.size).padStart(6)} ${entry.name}`);
  }
  console.log('reversed.csv:', (await sb.files.readText('/workspace/data/reversed.csv')).split(/\s+/).filter(Boolean));
  const back = await sb.files.read('/workspace/data/blob.bin');
  if (!Buffer.from(back).equals(Buffer.from(blob))) throw new Error('blob.bin came back changed');
  console.log('binary file round trip ok');
} finally {
  await sb.kill();
}
