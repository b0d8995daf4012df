// Removes build output (dist/, dist-test/).
import { rmSync } from 'node:fs';
for (const d of ['dist', 'dist-test']) rmSync(new URL(`../${d}`, import.meta.url), { recursive: true, force: true });
