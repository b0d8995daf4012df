// One command in a throwaway sandbox: create it, run, print, delete.
//
//   node dist/one_shot.js     # uses $HUTCH_URL or unix:///run/hutch/hutch.sock
import { Sandbox } from '@hutch/sdk';

await using sb = await Sandbox.create(); // deleted when the block ends
const result = await sb.commands.run("python3 -c 'print(1+1)'");
console.log(`sandbox ${sb.id}: exit ${result.exitCode}, stdout ${JSON.stringify(result.stdout)}`);
