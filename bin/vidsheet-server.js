#!/usr/bin/env node
import { main } from '../dist/server/main.js';
// Exit once main is done: a transfer the stop cut may still hold a socket or a timer (DESIGN §7: a
// stop ends the process).
process.exit(await main(process.argv.slice(2)));
