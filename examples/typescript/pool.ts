// A warm pool: sandboxes started ahead of time, so taking one costs no start. With
// `reuse: 'recycle'` a released sandbox is wiped and goes back to the pool. Managing pools is
// for admins (the local socket is admin).
//
//   node dist/pool.js
import { setTimeout as sleep } from 'node:timers/promises';

import { Hutch, Sandbox } from '@hutch/sdk';

const client = new Hutch();
await client.pools.create({ name: 'example-ts', size: 2, reuse: 'recycle', template: { contexts: ['python'] } });
try {
  while ((await client.pools.get('example-ts')).members.warm < 2) await sleep(100); // wait until it is filled

  const t0 = performance.now();
  const sb = await Sandbox.create({ client, pool: 'example-ts' }); // acquire: a warm member
  console.log(`acquired ${sb.id} from pool ${sb.pool} in ${(performance.now() - t0).toFixed(1)} ms`);
  process.stdout.write((await sb.commands.run('echo hello from a warm sandbox')).stdout);
  const [ctx] = await sb.contexts.list(); // the template's python context is already running
  console.log('python says', (await ctx!.run('6 * 7')).text);
  await sb.kill(); // release: wiped and put back warm

  const pool = await client.pools.get('example-ts');
  console.log(`pool: ${JSON.stringify(pool.members)}, hits ${pool.hits}, misses ${pool.misses}`);
} finally {
  await client.pools.delete('example-ts');
  client.close();
}
