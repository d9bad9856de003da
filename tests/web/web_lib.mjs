// web_lib.mjs -- what the browser tests share: calls to the API of the khub
// under test (KHUB_URL), a commit through the NDJSON commit endpoint, and a
// browser context signed in with a token through the sign-in form.
const URL_ = process.env.KHUB_URL;

// One API call: { status, headers, text, data (parsed JSON or null) }.
export async function api(method, path, { token, json, body, type } = {}) {
	const headers = {};
	if (token) headers.Authorization = `Bearer ${token}`;
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

// The same, throwing on any status of 300 or more.
export async function must(method, path, opts) {
	const r = await api(method, path, opts);
	if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${r.text.slice(0, 200)}`);
	return r;
}

// Commit files ({ path: string or Buffer }) to a branch of a kernel repo
// ("ns/name") as token; the new commit's sha.
export async function commitFiles(token, repo, files, summary, branch = "main") {
	const lines = [JSON.stringify({ key: "header", value: { summary, description: "" } })];
	for (const [path, content] of Object.entries(files))
		lines.push(JSON.stringify({ key: "file", value: { path, content: Buffer.from(content).toString("base64"),
			encoding: "base64" } }));
	const r = await must("POST", `/api/kernels/${repo}/commit/${encodeURIComponent(branch)}`, { token,
		body: lines.join("\n") + "\n", type: "application/x-ndjson" });
	return r.data.commitOid;
}

// A new browser context signed in with token: { ctx, page }.
export async function signedIn(browser, token) {
	const ctx = await browser.newContext({ baseURL: URL_ });
	const page = await ctx.newPage();
	await page.goto("/login");
	await page.fill("#token", token);
	await Promise.all([page.waitForURL(/\/kernels$/), page.click("form[action='/login'] button[type=submit]")]);
	return { ctx, page };
}
