// build_log_live.mjs -- a running build's log page in Debian's chromium
// (headless), driven by playwright-core, against a real khub (started by
// tests/integration/t0297-web-build-log-live.sh, which claimed a private
// kernel's build as its worker): the page signed in as alice follows the
// build while this script posts log chunks as the worker, shows a <script>
// line as text, stops following when the build fails (the status shown),
// and ends holding what the log route answers; without JavaScript the
// page shows the stored log. TAP out; screenshots under $ARTIFACTS.
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { test, done, bailOut } from "../js/tap.mjs";
import { signedIn } from "./web_lib.mjs";

const URL_ = process.env.KHUB_URL;
const ALICE = process.env.ALICE_TOKEN, WORKER = process.env.WORKER_TOKEN, JOB = process.env.JOB_ID;
const ARTIFACTS = process.env.ARTIFACTS || "tests/web/artifacts";
const LOG_PAGE = `/kernels/acme/secret/builds/${JOB}/log`;
mkdirSync(ARTIFACTS, { recursive: true });

// The worker's side (docs/build-farm.md): a heartbeat, then the chunk at
// its offset.
let offset = 0;
async function worker(path, body, type) {
	const res = await fetch(`${URL_}${path}`, { method: "POST", body,
		headers: { Authorization: `Bearer ${WORKER}`, "Content-Type": type } });
	if (res.status !== 200) throw new Error(`POST ${path}: ${res.status} ${await res.text()}`);
}
async function post(text) {
	await worker(`/api/builds/${JOB}/heartbeat`, "{}", "application/json");
	await worker(`/api/builds/${JOB}/log?offset=${offset}`, text, "application/octet-stream");
	offset += Buffer.byteLength(text);
}
async function logRoute() {
	const res = await fetch(`${URL_}/api/builds/${JOB}/log`, { headers: { Authorization: `Bearer ${ALICE}` } });
	return res.text();
}

let browser;
try {
	browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", args: ["--no-sandbox"] });
} catch (e) {
	bailOut(e);
}
const shot = (page, name) => page.screenshot({ path: `${ARTIFACTS}/${name}.png`, fullPage: true });
const { ctx, page } = await signedIn(browser, ALICE);
const errors = [];
page.on("pageerror", (e) => errors.push(`pageerror: ${e.message}`));
page.on("console", (m) => { if (m.type() === "error") errors.push(`console: ${m.text()}`); });
const logText = () => page.textContent("#build-log");
// (locators: the page's CSP allows no eval, which waitForFunction needs)
const waitFor = (text) => page.locator("#build-log", { hasText: text }).waitFor({ timeout: 120000 });

await test("the log page of the running build shows the stored log and follows it", async () => {
	await post("first line\n");
	await page.goto(LOG_PAGE);
	const problems = [];
	const events = await page.getAttribute("#build-log", "data-events");
	if (!events || !events.startsWith(`${LOG_PAGE}/events?offset=`)) problems.push(`data-events: ${events}`);
	if (!(await logText()).includes("first line")) problems.push("the stored log lacks the first line");
	await page.waitForSelector("#build-log-live", { timeout: 60000 });
	return problems;
});

await test("lines the worker posts appear while the page is open; a <script> line is text", async () => {
	await post("compiling relu.cpp\n<script>window.__pwned=1</script><img src=x onerror=\"window.__pwned=2\">\n");
	await waitFor("compiling relu.cpp");
	await post("linking\n");
	await waitFor("linking");
	await shot(page, "build-log-live");
	const problems = [];
	const pwned = await page.evaluate(() => window.__pwned);
	const elements = await page.$$eval("#build-log *", (es) => es.length);
	if (pwned !== undefined || elements) problems.push(`the log ran: __pwned=${pwned}, ${elements} elements in it`);
	if (!(await logText()).includes("<script>window.__pwned=1</script>")) problems.push("the <script> line is not shown as text");
	return problems;
});

await test("the build fails: the page stops following, shows the status and holds the log route's text", async () => {
	await post("error: undefined symbol\n");
	await worker(`/api/builds/${JOB}/fail`, JSON.stringify({ error: "compile error", retry: false }), "application/json");
	await page.locator("#build-log-live", { hasText: "ended" }).waitFor({ timeout: 120000 });
	await shot(page, "build-log-ended");
	const problems = [];
	const badge = await page.textContent(".build-status");
	if (badge !== "failed") problems.push(`status badge: ${badge}`);
	const shown = await logText(), stored = await logRoute();
	if (shown !== stored) problems.push(`page: ${JSON.stringify(shown.slice(-200))} log route: ${JSON.stringify(stored.slice(-200))}`);
	if (errors.length) problems.push(...errors);
	return problems;
});

await test("after the end the page has no live stream; without JavaScript it shows the stored log", async () => {
	await page.reload();
	const problems = [];
	if (await page.getAttribute("#build-log", "data-events")) problems.push("an ended build's page still follows");
	const noJs = await browser.newContext({ baseURL: URL_, javaScriptEnabled: false, storageState: await ctx.storageState() });
	const p = await noJs.newPage();
	await p.goto(LOG_PAGE);
	const text = await p.textContent("#build-log");
	if (text !== (await logRoute())) problems.push(`no-JS page: ${JSON.stringify(text.slice(0, 200))}`);
	await shot(p, "build-log-nojs");
	await noJs.close();
	return problems;
});

await browser.close();
done();
