#!/usr/bin/env node
// Validates speedscope files against the JSON schema that speedscope's own npm package
// ships (dist/release/file-format-schema.json), with ajv, a standard validator.
//
//   node tests/speedscope/validate.js FILE...
//
// Prints "ok FILE" or "invalid FILE: ..." per file; exits 0 if every file is valid,
// 1 if one is not, 2 if the validator cannot run (usage, packages not installed:
// run `npm ci` in tests/speedscope).
'use strict';

const fs = require('fs');
const path = require('path');

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error('usage: node validate.js FILE...');
  process.exit(2);
}

let Ajv, schema;
try {
  Ajv = require('ajv');
  const schemaPath = require.resolve('speedscope/dist/release/file-format-schema.json',
                                     { paths: [__dirname] });
  schema = JSON.parse(fs.readFileSync(schemaPath, 'utf8'));
} catch (e) {
  console.error(`cannot load ajv or speedscope's schema (run \`npm ci\` in ${__dirname}): ${e.message}`);
  process.exit(2);
}

const ajv = new Ajv({ allErrors: true });
const validate = ajv.compile(schema);

let bad = 0;
for (const file of files) {
  let doc;
  try {
    doc = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    console.log(`invalid ${file}: not JSON: ${e.message}`);
    bad++;
    continue;
  }
  if (validate(doc)) {
    console.log(`ok ${file}`);
  } else {
    const errs = validate.errors.slice(0, 5).map(
      (e) => `${e.instancePath || '/'} ${e.message}${e.params ? ' ' + JSON.stringify(e.params) : ''}`);
    console.log(`invalid ${file}: ${validate.errors.length} errors: ${errs.join('; ')}`);
    bad++;
  }
}
process.exit(bad ? 1 : 0);
