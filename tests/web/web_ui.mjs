// web_ui.mjs -- the web UI end to end in Debian's chromium (headless), driven
// by playwright-core, against a real khub (started by
// tests/integration/t0140-web-ui.sh) with data published here through the
// API: kernels, branches, a private repo, a hostile README, benchmark runs,
// downloads. Every answer the UI shows is compared with the API's. TAP out;
// screenshots of each page under $ARTIFACTS.
import { chromium } from "playwright-core";
import { mkdirSync, readFileSync } from "node:fs";
import { ok, test, diag, done, bailOut } from "../js/tap.mjs";

const URL_ = process.env.KHUB_URL;
const ROOT_ADMIN = process.env.ROOT_ADMIN_TOKEN;
const ROOT = process.env.ROOT_TOKEN, ALICE = process.env.ALICE_TOKEN, MALLORY = process.env.MALLORY_TOKEN;
const ARTIFACTS = process.env.ARTIFACTS || "tests/web/artifacts";
const ROUTES = JSON.parse(readFileSync(process.env.ROUTES_JSON, "utf8"));
mkdirSync(ARTIFACTS, { recursive: true });

const b64 = (s) => Buffer.from(s).toString("base64");
async function api(method, path, { token, json, body, type, ua } = {}) {
	const headers = {};
	if (token) headers.Authorization = `Bearer ${token}`;
	if (ua) headers["User-Agent"] = ua;
	if (json !== undefined) {
		headers["Content-Type"] = "application/json";
		body = JSON.stringify(json);
	} else if (type) headers["Content-Type"] = type;
	const res = await fetch(`${URL_}${path}`, { method, headers, body, redirect: "manual" });
	const text = await res.text();
	let data = null;
	try { data = JSON.parse(text); } catch { /* not JSON */ }
	return { status: res.status, headers: res.headers, text, data };
}
async function must(method, path, opts) {
	const r = await api(method, path, opts);
	if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${r.text.slice(0, 200)}`);
	return r;
}

// ---- publish through the API ------------------------------------------------------------------
const metadata = (backend) => JSON.stringify({ id: "relu", name: "relu", version: 1, license: "apache-2.0",
	"python-depends": [], backend: { type: backend } }) + "\n";
function variantFiles(variant, backend) {
	return { [`build/${variant}/__init__.py`]: "def relu(x):\n    return x\n",
		[`build/${variant}/metadata.json`]: metadata(backend) };
}
async function commit(repo, files, summary, branch = "main") {
	const lines = [JSON.stringify({ key: "header", value: { summary, description: "" } })];
	for (const [path, content] of Object.entries(files))
		lines.push(JSON.stringify({ key: "file", value: { path, content: b64(content), encoding: "base64" } }));
	const r = await must("POST", `/api/kernels/${repo}/commit/${branch}`, { token: ROOT, body: lines.join("\n") + "\n",
		type: "application/x-ndjson" });
	return r.data.commitOid;
}
async function createRepo(org, name, priv = false) {
	await must("POST", "/api/repos/create", { token: ROOT, json: { name, organization: org, type: "kernel", private: priv } });
}

const README = "# relu\n\nA ReLU kernel.\n\n| op | speed |\n|----|-------|\n| relu | fast |\n\n- [x] CUDA\n- [ ] Metal\n";
const HOSTILE = ["# hostile", "<script>window.__pwned = 'script'</script>",
	"[click me](javascript:window.__pwned='link')", "<img src=x onerror=\"window.__pwned='img'\">",
	"<div onmouseover=\"window.__pwned='div'\">raw html</div>", "![tracker](https://tracker.example/p.png)", "",
	"| n | cell |", "|---|------|", ...Array.from({ length: 10000 }, (_, i) => `| ${i} | <b>${i}</b> |`), ""].join("\n");

let SHA = {};
async function publish() {
	await createRepo("acme", "relu");
	await commit("acme/relu", { "README.md": README, ...variantFiles("torch-cpu", "cpu"),
		...variantFiles("torch211-cxx11-cu128-x86_64-linux", "cuda") }, "v1 variants");
	await must("POST", "/api/kernels/acme/relu/branch/v1", { token: ROOT, json: {} });
	SHA.v1 = (await must("GET", "/api/kernels/acme/relu/revision/v1", { token: ROOT })).data.sha;
	await commit("acme/relu", { ...variantFiles("torch211-cxx11-cu126-x86_64-linux", "cuda"),
		...variantFiles("torch212-cxx11-cu130-x86_64-linux", "cuda"),
		...variantFiles("torch211-cxx11-cpu-aarch64-linux", "cpu") }, "v2: more CUDA, aarch64");
	await must("POST", "/api/kernels/acme/relu/branch/v2", { token: ROOT, json: {} });
	SHA.v2 = (await must("GET", "/api/kernels/acme/relu/revision/v2", { token: ROOT })).data.sha;
	await createRepo("acme", "secret", true);
	await commit("acme/secret", { "README.md": "# secret\n", ...variantFiles("torch-cpu", "cpu") }, "secret");
	await createRepo("acme", "hostile");
	await commit("acme/hostile", { "README.md": HOSTILE, ...variantFiles("torch-cpu", "cpu") }, "hostile readme");
	await createRepo("other", "rocmkern");
	await commit("other/rocmkern", { "README.md": "# rocm\n", ...variantFiles("torch211-cxx11-rocm71-x86_64-linux", "rocm") },
		"rocm only");
	await must("PUT", "/api/admin/trusted-publishers/acme", { token: ROOT_ADMIN });
	// benchmark runs: two GPUs, two revisions, three workloads
	const run = (sha, gpu, backend, scale) => ({
		results: ["Relu.small", "Relu.large", "Relu.reference"].map((w, i) => ({ workload: w, timingResults: {
			mean_ms: (i + 1) * scale, std_ms: 0.01, min_ms: (i + 1) * scale * 0.9, max_ms: (i + 1) * scale * 1.1,
			q1_ms: (i + 1) * scale, q3_ms: (i + 1) * scale, iqr_ms: 0, outliers: 0, iterations: 100 } })),
		machineInfo: { gpu, backend, pytorchVersion: "2.11.0", os: "Linux", cpu: "x86_64" },
		kernelCommitSha: sha, benchmarkScriptPath: "benchmarks/benchmark.py" });
	for (const [sha, gpu, backend, scale] of [[SHA.v1, "NVIDIA H100", "CUDA 12.8", 1.0], [SHA.v2, "NVIDIA H100", "CUDA 12.8", 0.8],
		[SHA.v2, "NVIDIA A100", "CUDA 12.8", 1.5], [SHA.v2, "AMD MI300X", "ROCm 7.1", 1.2]])
		await must("POST", "/api/kernels/acme/relu/benchmarks", { token: ROOT, json: run(sha, gpu, backend, scale) });
	// downloads: a loader's full GETs of a variant's metadata.json count
	const ua = "kernels/0.15.2; hf_hub/1.29.0; python/3.11.2; torch/2.11.0";
	for (let i = 0; i < 3; i++)
		await must("GET", "/kernels/acme/relu/resolve/v2/build/torch211-cxx11-cu128-x86_64-linux/metadata.json", { ua });
	await must("GET", "/kernels/acme/relu/resolve/v2/build/torch-cpu/metadata.json", { ua });
	await new Promise((r) => setTimeout(r, 600));	// the server flushes counts every 200 ms
}

// ---- the browser --------------------------------------------------------------------------------
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
	args: ["--no-sandbox"] });
const shot = (page, name) => page.screenshot({ path: `${ARTIFACTS}/${name}.png`, fullPage: false });

async function signedIn(token) {
	const ctx = await browser.newContext({ baseURL: URL_ });
	const page = await ctx.newPage();
	await page.goto("/login");
	await page.fill("#token", token);
	await Promise.all([page.waitForURL(/\/kernels$/), page.click("form[action='/login'] button[type=submit]")]);
	return { ctx, page };
}
function watchErrors(page) {
	const errors = [];
	page.on("pageerror", (e) => errors.push(`pageerror: ${e.message}`));
	page.on("console", (m) => { if (m.type() === "error") errors.push(`console: ${m.text()}`); });
	return errors;
}

try {
	await publish();
	ok(true, "published kernels, a private repo, a hostile README, benchmarks and downloads through the API");
} catch (e) {
	bailOut(e);
}

// Routing: no API route answers HTML (the page table never shadows them).
await test("no route of `khub routes --json` answers text/html", async () => {
	const fill = { "{type}": "kernels", "{tprefix}": "kernels", "{ns}": "acme", "{name}": "relu", "{gname}": "relu.git",
		"{org}": "acme", "{arg}": "x", "{rev}": "main", "{path*}": "README.md" };
	const problems = [];
	for (const r of ROUTES) {
		const path = r.pattern.replace(/\{[a-z*]+\}/g, (m) => fill[m] ?? m);
		for (const method of r.methods.filter((m) => m !== "HEAD")) {
			const res = await api(method, path, { token: ROOT, body: method === "GET" || method === "DELETE" ? undefined : "{}",
				type: method === "GET" || method === "DELETE" ? undefined : "application/json" });
			const ct = res.headers.get("content-type") || "";
			if (ct.includes("text/html"))
				problems.push(`${method} ${path}: ${res.status} ${ct}`);
		}
	}
	diag(`${ROUTES.length} API routes checked`);
	return problems;
});

// Sign in, and what the session cookie is.
const alice = await signedIn(ALICE);
await test("sign in with a token: a session cookie (HttpOnly, SameSite=Lax), the token in no URL", async () => {
	const cookies = await alice.ctx.cookies();
	const s = cookies.find((c) => c.name === "khub_session");
	const problems = [];
	if (!s) return ["no khub_session cookie"];
	if (!s.httpOnly) problems.push("cookie not HttpOnly");
	if (s.sameSite !== "Lax") problems.push(`SameSite ${s.sameSite}`);
	if (s.value.includes(ALICE) || alice.page.url().includes(ALICE)) problems.push("the token leaked");
	const nav = await alice.page.textContent("header.site");
	if (!nav.includes("alice")) problems.push("the header does not name alice");
	await shot(alice.page, "kernels");
	return problems;
});

await test("every page carries CSP without unsafe-inline, nosniff, frame-ancestors 'none', Referrer-Policy", async () => {
	const problems = [];
	for (const path of ["/kernels", "/kernels/acme/relu", "/login", "/kernels/acme/nope", "/acme"]) {
		const res = await alice.page.request.get(path);
		const h = res.headers();
		const csp = h["content-security-policy"] || "";
		if (!csp || csp.includes("unsafe-inline") || !csp.includes("frame-ancestors 'none'"))
			problems.push(`${path}: CSP ${csp}`);
		if (h["x-content-type-options"] !== "nosniff") problems.push(`${path}: no nosniff`);
		if (h["referrer-policy"] !== "same-origin") problems.push(`${path}: Referrer-Policy ${h["referrer-policy"]}`);
		if (h["access-control-allow-origin"]) problems.push(`${path}: CORS header on a cookie page`);
	}
	return problems;
});

// The listing against GET /api/kernels, for the same caller and filters.
async function listingMatches(page, query) {
	await page.goto(`/kernels?${query}`);
	const rows = await page.$$eval("#kernels tbody tr", (trs) => trs.map((t) => t.dataset.id));
	const want = (await must("GET", `/api/kernels?${query}`, { token: ALICE })).data.map((k) => k.id);
	return JSON.stringify(rows) === JSON.stringify(want) ? [] : [`${query}: page ${rows} api ${want}`];
}
for (const q of ["sort=id", "backend=cuda&sort=id", "backend=rocm", "torch=2.12&sort=downloads", "trusted=true&sort=id",
	"search=rel&arch=aarch64", "backend=cuda&backend_version=12.6", "os=darwin"])
	await test(`listing ${q} shows the rows GET /api/kernels answers`, () => listingMatches(alice.page, q));
await test("listing filters set in the form with the keyboard give the API's rows", async () => {
	const page = alice.page;
	await page.goto("/kernels");
	await page.focus("#f-search");
	await page.keyboard.type("acme");
	await page.selectOption("#f-sort", "id");
	await page.selectOption("#f-backend", "cuda");
	await page.focus("#f-torch");
	await Promise.all([page.waitForURL(/backend=cuda/), page.keyboard.press("Enter")]);
	const rows = await page.$$eval("#kernels tbody tr", (trs) => trs.map((t) => t.dataset.id));
	const sparks = await page.$$eval("#kernels tbody tr svg.spark polyline", (p) => p.length);
	const want = (await must("GET", "/api/kernels?search=acme&backend=cuda&sort=id", { token: ALICE })).data.map((k) => k.id);
	const problems = [];
	if (!rows.length || JSON.stringify(rows) !== JSON.stringify(want)) problems.push(`page ${rows} api ${want}`);
	if (sparks !== rows.length) problems.push(`${sparks} sparklines for ${rows.length} rows`);
	return problems;
});

// The kernel page: the variant matrix and compliance against the API.
const kernelErrors = watchErrors(alice.page);
await alice.page.goto("/kernels/acme/relu?rev=v2");
await test("kernel page: the variant matrix lists the variants of GET .../variants", async () => {
	const shown = await alice.page.$$eval("#variant-matrix tr[data-variant]", (trs) => trs.map((t) => t.dataset.variant));
	const want = (await must("GET", "/api/kernels/acme/relu/variants?revision=v2", { token: ALICE })).data.variants.map((v) => v.name);
	return JSON.stringify(shown.sort()) === JSON.stringify(want.sort()) ? [] : [`page ${shown} api ${want}`];
});
await test("kernel page: missing variants highlighted are those of GET .../compliance", async () => {
	const shown = await alice.page.$$eval("#variant-matrix tr.missing", (trs) => trs.map((t) => t.dataset.missing));
	const c = (await must("GET", "/api/kernels/acme/relu/compliance?revision=v2", { token: ALICE })).data.versions[0];
	const want = c.groups.filter((g) => g.targeted && !g.compliant).flatMap((g) => g.missing);
	const badge = await alice.page.textContent("#compliance-summary .badge");
	const problems = [];
	if (JSON.stringify(shown.sort()) !== JSON.stringify(want.sort())) problems.push(`page ${shown.length} api ${want.length}`);
	if (badge !== (c.compliant ? "compliant" : "not compliant"))
		problems.push(`summary says "${badge}" but compliant=${c.compliant}`);
	return problems;
});
await test("kernel page: versions and usage snippets", async () => {
	const versions = await alice.page.$$eval("#versions tbody tr td:first-child", (tds) => tds.map((t) => t.textContent));
	const snippet = await alice.page.textContent("#snippet-python");
	const problems = [];
	if (JSON.stringify(versions) !== JSON.stringify(["v2", "v1"])) problems.push(`versions ${versions}`);
	if (!snippet.includes('get_kernel("acme/relu", version=2)')) problems.push(`snippet ${snippet}`);
	return problems;
});

// "Will it load for me?" equals /variants?compatible=true for three environments.
const envs = [
	{ line: "torch=2.11.0 cuda=12.8 os=linux arch=x86_64", query: "torch=2.11&cuda=12.8&os=linux&arch=x86_64" },
	{ line: "torch=2.12.1 cuda=13.0 os=linux arch=x86_64", query: "torch=2.12&cuda=13.0&os=linux&arch=x86_64" },
	{ line: "torch=2.11.0 backend=cpu os=linux arch=aarch64", query: "torch=2.11&backend=cpu&os=linux&arch=aarch64" },
];
for (const env of envs) {
	await test(`will it load (${env.line}) = GET .../variants?compatible=true`, async () => {
		const page = alice.page;
		await page.fill("#wil-paste", env.line);
		await page.click("#wil-form button[type=submit]");
		await page.waitForSelector("#wil-selected");
		const selected = await page.getAttribute("#wil-selected", "data-selected");
		const rejected = await page.$$eval("#wil-rejected tbody tr", (trs) => trs.length);
		const want = (await must("GET", `/api/kernels/acme/relu/variants?compatible=true&revision=${SHA.v2}&${env.query}`,
			{ token: ALICE })).data;
		await page.evaluate(() => document.getElementById("wil-result").replaceChildren());
		return selected === (want.selected || "") && rejected === want.rejected.length ? [] :
			[`page ${selected}/${rejected} api ${want.selected}/${want.rejected.length}`];
	});
}

await test("benchmark and download charts draw one series per GPU/backend, workload and variant", async () => {
	const page = alice.page;
	await page.waitForSelector("#chart-latency[data-series] canvas", { timeout: 10000 });
	await page.waitForSelector("#chart-downloads[data-series]", { timeout: 10000 });
	const runs = (await must("GET", "/api/kernels/acme/relu/benchmarks?limit=1000", { token: ALICE })).data;
	const machines = new Set(runs.map((r) => `${r.machineInfo.gpu} · ${r.machineInfo.backend}`));
	const workloads = new Set(runs.flatMap((r) => r.results.map((x) => x.workload)));
	const dl = (await must("GET", "/api/kernels/acme/relu/downloads?days=30", { token: ALICE })).data;
	const variants = dl.variants.filter((v) => v.total > 0).length;
	const got = await page.evaluate(() => ["chart-latency", "chart-history", "chart-downloads"].map(
		(id) => Number(document.getElementById(id).dataset.series)));
	const speedups = await page.$$eval("#bench-speedup tbody tr", (trs) => trs.length);
	const agg = (await must("GET", "/api/kernels/acme/relu/benchmarks/aggregate", { token: ALICE })).data.results.length;
	const compare = await page.$$eval("#bench-compare-table tbody tr", (trs) => trs.length);
	await page.locator("#benchmarks").scrollIntoViewIfNeeded();
	await shot(page, "kernel-benchmarks");
	const problems = [];
	if (got[0] !== machines.size) problems.push(`latency ${got[0]} series, ${machines.size} GPU/backend pairs`);
	if (got[1] !== workloads.size) problems.push(`history ${got[1]} series, ${workloads.size} workloads`);
	if (got[2] !== variants || variants < 2) problems.push(`downloads ${got[2]} series, ${variants} variants`);
	if (speedups !== agg) problems.push(`speedup table ${speedups} rows, aggregate ${agg}`);
	if (!compare) problems.push("the two-revision comparison is empty");
	return problems;
});
await test("the kernel page runs without script errors or CSP violations", async () => kernelErrors.slice(0, 5));
await alice.page.goto("/kernels/acme/relu?rev=v2");
await shot(alice.page, "kernel");
await test("benchmark CSV downloads from the page's link", async () => {
	const href = await alice.page.getAttribute("#bench-csv", "href");
	const res = await alice.page.request.get(href);
	const text = await res.text();
	return res.status() === 200 && text.startsWith("workload,gpu,") && text.split("\r\n").length > 3 ? [] :
		[`${res.status()} ${text.slice(0, 80)}`];
});

await test("file browser: sizes, download links that work with the session", async () => {
	const page = alice.page;
	await page.goto("/kernels/acme/relu/tree/v2/build/torch-cpu");
	const names = await page.$$eval("#files tbody th a", (as) => as.map((a) => a.textContent));
	const tree = (await must("GET", "/api/kernels/acme/relu/tree/v2/build/torch-cpu", { token: ALICE })).data;
	const href = await page.getAttribute("#files tbody th a", "href");
	const res = await page.request.get(href);
	await shot(page, "files");
	const want = tree.map((e) => e.path.split("/").pop());
	return JSON.stringify(names.sort()) === JSON.stringify(want.sort()) && res.status() === 200 ? [] :
		[`names ${names} api ${want}, download ${res.status()}`];
});
await test("commit history lists the API's commits", async () => {
	const page = alice.page;
	await page.goto("/kernels/acme/relu/commits/main");
	const titles = await page.$$eval("#commits li a.commit-title", (s) => s.map((x) => x.textContent));
	const api_ = (await must("GET", "/api/kernels/acme/relu/commits/main", { token: ALICE })).data.map((c) => c.title);
	await shot(page, "commits");
	return JSON.stringify(titles) === JSON.stringify(api_) ? [] : [`page ${titles} api ${api_}`];
});

// Private repos: a 404 page signed out and for a non-member; the member sees it.
await test("a private repo is a 404 page signed out and for a non-member, readable by a member", async () => {
	const anon = await browser.newContext({ baseURL: URL_ });
	const p1 = await anon.newPage();
	const r1 = await p1.goto("/kernels/acme/secret");
	const t1 = await p1.title();
	const r1b = await p1.goto("/kernels/acme/secret/tree/main");
	const mallory = await signedIn(MALLORY);
	const r2 = await mallory.page.goto("/kernels/acme/secret");
	const listed = await mallory.page.goto("/kernels?search=secret");
	const rowsMallory = await mallory.page.$$eval("#kernels tbody tr", (t) => t.length);
	const r3 = await alice.page.goto("/kernels/acme/secret");
	await shot(p1, "private-404");
	await anon.close();
	await mallory.ctx.close();
	const problems = [];
	if (r1.status() !== 404 || !t1.startsWith("Not found")) problems.push(`signed out: ${r1.status()} ${t1}`);
	if (r1b.status() !== 404) problems.push(`signed out tree: ${r1b.status()}`);
	if (r2.status() !== 404) problems.push(`non-member: ${r2.status()}`);
	if (listed.status() !== 200 || rowsMallory !== 0) problems.push(`non-member listing shows ${rowsMallory} rows`);
	if (r3.status() !== 200) problems.push(`member: ${r3.status()}`);
	return problems;
});

// Tokens: create (shown once), revoke, and the API's answer to it.
await test("create a token on /settings/tokens (Copy copies it), revoke it after the confirmation: the API then answers 401", async () => {
	const page = alice.page;
	await page.goto("/settings/tokens");
	await page.fill("#t-name", "from-the-ui");
	await page.selectOption("#t-scope", "read");
	await page.click("form[action='/settings/tokens'] button[type=submit]");
	const token = (await page.textContent("#new-token")).trim();
	await shot(page, "tokens");
	// the Copy button (static/copy.js) puts the token on the clipboard
	await alice.ctx.grantPermissions(["clipboard-read", "clipboard-write"]);
	await page.click("button[aria-label='Copy new token']");
	const copied = await page.evaluate(() => navigator.clipboard.readText());
	const label = (await page.textContent("button[aria-label='Copy new token']")).trim();
	const before = await api("GET", "/api/whoami-v2", { token });
	await page.goto("/settings/tokens");
	const again = await page.content();
	await page.click("a[aria-label='Revoke token from-the-ui']");
	await page.waitForURL(/\/settings\/tokens\/revoke\?id=/);
	const asked = await page.textContent("h1");
	await page.click("#revoke-confirm");
	await page.waitForURL(/\/settings\/tokens$/);
	await new Promise((r) => setTimeout(r, 300));
	const after = await api("GET", "/api/whoami-v2", { token });
	const problems = [];
	if (!token.startsWith("hf_")) problems.push(`token ${token}`);
	if (before.status !== 200 || before.data.name !== "alice") problems.push(`before revoke: ${before.status}`);
	if (again.includes(token)) problems.push("the token was shown twice");
	if (copied !== token || label !== "Copied") problems.push(`Copy: clipboard "${copied}", button "${label}"`);
	if (!asked.includes("Revoke token") || !asked.includes("from-the-ui")) problems.push(`confirmation: "${asked}"`);
	if (after.status !== 401) problems.push(`after revoke: ${after.status}`);
	return problems;
});

await test("revoking a token ends the sessions opened with it", async () => {
	const page = alice.page;
	await page.goto("/settings/tokens");
	await page.fill("#t-name", "second-browser");
	await page.click("form[action='/settings/tokens'] button[type=submit]");
	const token = (await page.textContent("#new-token")).trim();
	const other = await signedIn(token);
	const before = await other.page.goto("/settings/tokens");
	await page.goto("/settings/tokens");
	await page.click("a[aria-label='Revoke token second-browser']");
	await page.click("#revoke-confirm");
	await page.waitForURL(/\/settings\/tokens$/);
	const after = await other.page.goto("/settings/tokens");
	const still = await page.goto("/settings/tokens");
	await other.ctx.close();
	return before.status() === 200 && after.status() === 401 && still.status() === 200 ? [] :
		[`other session before ${before.status()}, after ${after.status()}; alice's ${still.status()}`];
});

await test("a POST without the CSRF token (or with another session's) is refused", async () => {
	const page = alice.page;
	const count = async () => (await page.request.get("/settings/tokens").then((r) => r.text())).split("data-token-id").length;
	const n = await count();
	const r1 = await page.request.post("/settings/tokens", { form: { name: "csrf-less", scope: "read", days: "1" } });
	const r2 = await page.request.post("/settings/tokens", { form: { name: "forged", scope: "read", days: "1", csrf: "0".repeat(64) } });
	const r3 = await page.request.post("/logout", { form: {} });
	const still = await page.request.get("/settings/tokens");
	const problems = [];
	if (r1.status() !== 403 || r2.status() !== 403 || r3.status() !== 403) problems.push(`statuses ${r1.status()} ${r2.status()} ${r3.status()}`);
	if ((await count()) !== n) problems.push("a token was created anyway");
	if (still.status() !== 200) problems.push("the session ended anyway");
	return problems;
});

// A hostile README renders inert, and the page stays responsive.
await test("a hostile README (script, javascript: link, raw HTML, 10,000-row table) renders inert", async () => {
	const page = alice.page;
	const errors = watchErrors(page);
	const t0 = Date.now();
	const res = await page.goto("/kernels/acme/hostile");
	const loadMs = Date.now() - t0;
	const t1 = Date.now();
	await page.evaluate(() => 1);
	await page.hover(".readme table");
	await page.keyboard.press("Tab");
	const interactMs = Date.now() - t1;
	const r = await page.evaluate(() => ({
		pwned: window.__pwned, scripts: document.querySelectorAll(".readme script, .readme iframe").length,
		js: document.querySelectorAll(".readme a[href^='javascript' i]").length,
		handlers: [...document.querySelectorAll(".readme *")].filter((e) => [...e.attributes].some((a) => a.name.startsWith("on"))).length,
		imgs: [...document.querySelectorAll(".readme img")].map((i) => i.getAttribute("src")),
		rows: document.querySelectorAll(".readme table tbody tr").length }));
	await shot(page, "hostile-readme");
	const problems = [];
	if (res.status() !== 200) problems.push(`status ${res.status()}`);
	if (r.pwned !== undefined) problems.push(`script ran: ${r.pwned}`);
	if (r.scripts || r.js || r.handlers) problems.push(`scripts ${r.scripts}, javascript: links ${r.js}, handlers ${r.handlers}`);
	if (r.imgs.some((s) => s && !s.startsWith("/"))) problems.push(`foreign images ${r.imgs}`);
	if (r.rows !== 10000) problems.push(`table rows ${r.rows}`);
	if (loadMs > 15000 || interactMs > 2000) problems.push(`slow: load ${loadMs} ms, interaction ${interactMs} ms`);
	diag(`hostile README page: load ${loadMs} ms, interaction ${interactMs} ms`);
	return problems.concat(errors.filter((e) => !e.includes("404")).slice(0, 3));
});

// The org page and /admin.
await test("org page: kernels, members; an org admin changes a role", async () => {
	const root = await signedIn(ROOT);
	const page = root.page;
	await page.goto("/acme");
	const kernels = await page.$$eval("#ns-kernels a", (as) => as.map((a) => a.textContent));
	const want = (await must("GET", "/api/kernels?author=acme&limit=1000", { token: ROOT })).data.map((k) => k.id);
	const forms = await page.$$("#members form");
	let changed = false;
	for (const f of forms) {
		if ((await f.$eval("input[name=user]", (i) => i.value)) !== "mallory") continue;
		await (await f.$("select")).selectOption("write");
		await Promise.all([page.waitForURL(/\/acme$/), (await f.$("button")).click()]);
		changed = true;
		break;
	}
	const role = await page.$eval("#members", (t) => [...t.querySelectorAll("tr")].find((r) => r.textContent.includes("mallory"))
		?.querySelector("select")?.value);
	await shot(page, "org");
	await page.goto("/admin");
	const builds = await page.$eval("#builds", (s) => s.textContent).catch(() => "");
	const activity = await page.$$eval("#activity tbody tr", (trs) => trs.map((t) => t.textContent));
	await page.click("form[action='/admin/mirror/sync'] button");
	await page.waitForURL(/synced=1/);
	await shot(page, "admin");
	const aliceAdmin = await alice.page.goto("/admin");
	await root.ctx.close();
	const problems = [];
	if (JSON.stringify(kernels.sort()) !== JSON.stringify(want.sort())) problems.push(`kernels ${kernels} api ${want}`);
	if (!changed || role !== "write") problems.push(`role change: ${changed} ${role}`);
	if (!builds.includes("ui-worker-1") || !builds.includes("No build yet"))
		problems.push(`the Builds section does not list the worker ui-worker-1 and the empty queue: ${builds.slice(0, 200)}`);
	if (!activity.some((t) => t.includes("root") && t.includes("org.member.set") && t.includes("acme")))
		problems.push(`recent activity does not show root's role change in acme: ${activity.slice(0, 3)}`);
	if (aliceAdmin.status() !== 403) problems.push(`/admin for a non-admin: ${aliceAdmin.status()}`);
	return problems;
});

await test("forms are labelled, the keyboard reaches them, and the reading pages work without JavaScript", async () => {
	const ctx = await browser.newContext({ baseURL: URL_, javaScriptEnabled: false });
	const page = await ctx.newPage();
	const problems = [];
	for (const path of ["/kernels", "/kernels/acme/relu", "/login", "/kernels/acme/relu/tree/main", "/acme"]) {
		const res = await page.goto(path);
		if (res.status() !== 200) problems.push(`${path}: ${res.status()}`);
		// (a README's task-list boxes are disabled, read-only text)
		const unlabelled = await page.$$eval("input:not([type=hidden]):not(.readme *), select, textarea", (els) =>
			els.filter((e) => !(e.labels && e.labels.length) && !e.getAttribute("aria-label")).map((e) => e.id || e.name));
		if (unlabelled.length) problems.push(`${path}: unlabelled ${unlabelled}`);
	}
	await page.goto("/kernels");
	await page.keyboard.press("Tab");
	const first = await page.evaluate(() => document.activeElement.textContent.trim());
	if (first !== "Skip to content") problems.push(`the first Tab stop is "${first}", not the skip link`);
	await page.keyboard.press("Enter");
	for (let i = 0; i < 3; i++) await page.keyboard.press("Tab");
	const inForm = await page.evaluate(() => document.activeElement.closest("form.filters") !== null);
	if (!inForm) problems.push("Tab from the skip link does not reach the filters");
	const rows = await (await page.goto("/kernels?backend=cuda")) && await page.$$eval("#kernels tbody tr", (t) => t.length);
	if (!rows) problems.push("the filtered listing is empty without JavaScript");
	await ctx.close();
	return problems;
});

await test("sign out ends the session", async () => {
	const page = alice.page;
	await page.goto("/kernels");
	await Promise.all([page.waitForURL(/\/kernels$/), page.click("form[action='/logout'] button")]);
	const res = await page.goto("/settings/tokens");
	return res.status() === 401 ? [] : [`after sign-out /settings/tokens answered ${res.status()}`];
});

await browser.close();
done();
