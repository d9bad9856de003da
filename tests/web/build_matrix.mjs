// build_matrix.mjs -- the build matrix in Debian's chromium (headless), driven by
// playwright-core, against a real khub (started by
// tests/integration/t0263-web-build-matrix.sh, which queued the builds of a
// public and a private kernel and failed one with a hostile log): the builds
// page and the kernel page show what GET .../builds?commit= answers, for a
// writer and for a read member (the private repo through the session); the
// writer's cancel, retry and "Build missing" buttons change what the API then
// answers; the reader gets no buttons; the log page shows the log's <script>
// as text. TAP out; screenshots under $ARTIFACTS.
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { test, done, bailOut } from "../js/tap.mjs";

const URL_ = process.env.KHUB_URL;
const ALICE = process.env.ALICE_TOKEN, BOB = process.env.BOB_TOKEN;
const REPOS = { "acme/relu": process.env.RELU_SHA, "acme/secret": process.env.SECRET_SHA };
const FAILED = process.env.FAILED_ID;
const ARTIFACTS = process.env.ARTIFACTS || "tests/web/artifacts";
mkdirSync(ARTIFACTS, { recursive: true });

async function api(path, token) {
	const res = await fetch(`${URL_}${path}`, { headers: { Authorization: `Bearer ${token}` } });
	if (res.status !== 200) throw new Error(`GET ${path}: ${res.status}`);
	return res.json();
}
const matrix = (repo, token) => api(`/api/kernels/${repo}/builds?commit=${REPOS[repo]}`, token);

let browser;
try {
	browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", args: ["--no-sandbox"] });
} catch (e) {
	bailOut(e);
}
const shot = (page, name) => page.screenshot({ path: `${ARTIFACTS}/${name}.png`, fullPage: true });

async function signedIn(token) {
	const ctx = await browser.newContext({ baseURL: URL_ });
	const page = await ctx.newPage();
	const errors = [];
	page.on("pageerror", (e) => errors.push(`pageerror: ${e.message}`));
	await page.goto("/login");
	await page.fill("#token", token);
	await Promise.all([page.waitForURL(/\/kernels$/), page.click("form[action='/login'] button[type=submit]")]);
	return { ctx, page, errors };
}

// The builds page of a commit as {variant: "status build"}, its unbuildable
// variants, and whether it shows the writers' forms.
async function buildsPage(page, repo) {
	await page.goto(`/kernels/${repo}/builds?commit=${REPOS[repo]}`);
	const cells = await page.$$eval(".build-matrix tr[data-variant]", (trs) => Object.fromEntries(trs.map((t) =>
		[t.dataset.variant, `${t.querySelector(".build-status").dataset.status} ${t.dataset.build}`])));
	const unbuildable = await page.$$eval(".build-matrix ul.unbuildable li", (lis) =>
		lis.map((l) => `${l.dataset.variant}: ${l.querySelector(".reason").textContent}`));
	const forms = await page.$$eval(".build-matrix form", (fs) => fs.length);
	return { cells, unbuildable, forms };
}
const apiCells = (m) => Object.fromEntries(m.variants.map((v) => [v.variant, `${v.status} ${v.id}`]));
const apiUnbuildable = (m) => m.unbuildable.map((u) => `${u.variant}: ${u.reason}`);
function compare(what, shown, want) {
	return JSON.stringify(shown) === JSON.stringify(want) ? [] : [`${what}: page ${JSON.stringify(shown)} api ${JSON.stringify(want)}`];
}

// The kernel page's Build column as {variant: status}, and its commit.
async function kernelColumn(page, repo) {
	await page.goto(`/kernels/${repo}`);
	const cells = await page.$$eval("#variant-matrix tbody tr", (trs) => Object.fromEntries(trs
		.filter((t) => t.querySelector("td.build .build-status"))
		.map((t) => [t.dataset.variant || t.dataset.missing || t.dataset.buildOnly,
			t.querySelector("td.build .build-status").dataset.status])));
	const commit = await page.$eval("#build-column", (p) => p.dataset.commit);
	return { cells, commit };
}

const alice = await signedIn(ALICE);
const bob = await signedIn(BOB);

for (const repo of Object.keys(REPOS)) {
	await test(`${repo}: the builds page of the commit shows GET .../builds?commit= (alice, a writer)`, async () => {
		const m = await matrix(repo, ALICE);
		const p = await buildsPage(alice.page, repo);
		await shot(alice.page, `builds-${repo.replace("/", "-")}`);
		const problems = [...compare("cells", p.cells, apiCells(m)), ...compare("unbuildable", p.unbuildable, apiUnbuildable(m))];
		if (m.variants.length < 2 || !m.unbuildable.length) problems.push(`a thin matrix: ${JSON.stringify(m).slice(0, 300)}`);
		if (!p.forms) problems.push("a writer sees no forms");
		return problems;
	});
	await test(`${repo}: the kernel page's Build column shows the same states (main's head)`, async () => {
		const m = await matrix(repo, ALICE);
		const k = await kernelColumn(alice.page, repo);
		await shot(alice.page, `kernel-${repo.replace("/", "-")}`);
		const want = Object.fromEntries(m.variants.map((v) => [v.variant, v.status]));
		return [...compare("kernel page", k.cells, want), ...(k.commit === REPOS[repo] ? [] : [`commit ${k.commit}`])];
	});
	await test(`${repo}: bob (read member) sees the same matrix, without buttons`, async () => {
		const m = await matrix(repo, BOB);
		const p = await buildsPage(bob.page, repo);
		const problems = compare("cells", p.cells, apiCells(m));
		if (p.forms) problems.push(`${p.forms} forms shown to a reader`);
		return problems;
	});
}

await test("the builds list: the newest commit's matrix first, as GET .../builds lists it", async () => {
	const list = await api("/api/kernels/acme/secret/builds", ALICE);
	await alice.page.goto("/kernels/acme/secret/builds");
	const commits = await alice.page.$$eval(".build-matrix", (ss) => ss.map((s) => s.dataset.commit));
	return compare("commits", commits, list.matrices.map((m) => m.commit));
});

await test("the log page shows the build's <script> as text and runs none of it", async () => {
	await alice.page.goto(`/kernels/acme/relu/builds/${FAILED}/log`);
	await shot(alice.page, "build-log");
	const text = await alice.page.textContent("#build-log");
	const pwned = await alice.page.evaluate(() => window.__pwned);
	const imgs = await alice.page.$$eval("#build-log img, #build-log script", (es) => es.length);
	const problems = [];
	if (!text.includes("<script>window.__pwned=1</script>")) problems.push(`log text: ${text.slice(0, 200)}`);
	if (pwned !== undefined || imgs) problems.push(`the log ran: __pwned=${pwned}, ${imgs} elements`);
	return problems;
});

await test("alice cancels a queued build with its button; the API and the page say canceled; retry queues it", async () => {
	const repo = "acme/secret";
	const before = await matrix(repo, ALICE);
	const cell = before.variants.find((v) => v.status === "queued");
	if (!cell) return [`nothing queued: ${JSON.stringify(before.variants)}`];
	await alice.page.goto(`/kernels/${repo}/builds?commit=${REPOS[repo]}`);
	await Promise.all([alice.page.waitForURL(/builds\?commit=/),
		alice.page.click(`tr[data-build="${cell.id}"] button.build-cancel`)]);
	const canceled = (await api(`/api/builds/${cell.id}`, ALICE)).state;
	const shown = await alice.page.$eval(`tr[data-build="${cell.id}"] .build-status`, (b) => b.dataset.status);
	await Promise.all([alice.page.waitForURL(/builds\?commit=/),
		alice.page.click(`tr[data-build="${cell.id}"] button.build-retry`)]);
	const retried = (await api(`/api/builds/${cell.id}`, ALICE)).state;
	return canceled === "canceled" && shown === "canceled" && retried === "queued" ? []
		: [`after cancel: api ${canceled} page ${shown}; after retry: api ${retried}`];
});

await test("alice's Build missing on the kernel page queues a canceled variant anew", async () => {
	const repo = "acme/relu";
	const before = await matrix(repo, ALICE);
	const cell = before.variants.find((v) => v.status === "queued");
	if (!cell) return [`nothing queued: ${JSON.stringify(before.variants)}`];
	await alice.page.goto(`/kernels/${repo}`);
	await Promise.all([alice.page.waitForURL(new RegExp(`/kernels/${repo}$`)),
		alice.page.click(`#variant-matrix td.build button.build-cancel >> nth=0`)]);
	const canceled = (await matrix(repo, ALICE)).variants.filter((v) => v.status === "canceled").map((v) => v.variant);
	await Promise.all([alice.page.waitForURL(new RegExp(`/kernels/${repo}$`)),
		alice.page.click("form.build-missing button")]);
	const after = await matrix(repo, ALICE);
	const k = await kernelColumn(alice.page, repo);
	const problems = compare("kernel page after", k.cells, Object.fromEntries(after.variants.map((v) => [v.variant, v.status])));
	const again = after.variants.find((v) => v.variant === canceled[0]);
	if (canceled.length !== 1 || !again || again.status !== "queued" || again.id === cell.id)
		problems.push(`canceled ${canceled}; after Build missing: ${JSON.stringify(again)}`);
	return problems;
});

await test("no page error in either session", async () => [...alice.errors, ...bob.errors]);

await browser.close();
done();
