// Validates JSON texts against JSON Schemas with ajv (and ajv-formats), a
// validator we did not write.  The argument: a file holding a JSON array
// of [schema, text] pairs.  Exits 0 when every text parses and validates,
// else 1, printing what failed.
// usage: node t/nginx/ajv_check.mjs FILE
import { createRequire } from 'module';
import fs from 'fs';
import path from 'path';

const require = createRequire(path.join(process.env.NODE_PATH || '.', 'x.js'));
const Ajv = require('ajv');
const addFormats = require('ajv-formats');

const ajv = new Ajv({ strict: false });
addFormats(ajv);
const pairs = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
let bad = 0;

for (const [schema, text] of pairs) {
    let value;
    try {
        value = JSON.parse(text);
    } catch (e) {
        console.log(`not JSON: ${text}`);
        bad++;
        continue;
    }
    const validate = ajv.compile(schema);
    if (!validate(value)) {
        console.log(`invalid: ${text}: ${ajv.errorsText(validate.errors)}`);
        bad++;
    }
}
console.log(`${pairs.length - bad} of ${pairs.length} valid`);
process.exit(pairs.length > 0 && bad === 0 ? 0 : 1);
