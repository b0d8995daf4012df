// dist/cjs holds CommonJS in a "type": "module" package: mark the folder so Node loads it as such.
import { writeFileSync } from 'node:fs';
writeFileSync(new URL('../dist/cjs/package.json', import.meta.url), '{\n  "type": "commonjs"\n}\n');
