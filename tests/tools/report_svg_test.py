#!/usr/bin/env python3
"""report_svg_test.py LMS_REPORT FIXTURES WORKDIR — lms-report --svg as the
picture a README shows (tools/report_svg.c, Note [The SVG on its own]), on
the hand-made timeline FIXTURES/finished.json and that file cut after its
first iteration mark (a run that died):

  - the file is well-formed XML whose root is an SVG 1.1 <svg> with a size
    and a viewBox, a <title> and a <desc>, on a white background;
  - its heading says what the run was on: the timeline, backend, device,
    link, limits, iterations and length, whether it finished, and the
    --caption line;
  - the three charts are there, each with its title and axis labels;
  - nothing a renderer showing it as an image would refuse or fetch: no
    script, style, link, image, foreign object, event attribute or url();
    the fonts are the system's sans-serif; no text smaller than 10 px or
    placed outside the picture;
  - --caption without --svg is refused with exit status 2.
"""
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"
failures = []


def fail(why):
    failures.append(why)
    print("FAIL: " + why)


def run(report, *args):
    return subprocess.run([report, *args], capture_output=True, text=True)


def text_of(root, ident):
    for e in root.iter():
        if e.get("id") == ident:
            return "".join(e.itertext())
    return None


def expect_text(root, ident, *parts):
    got = text_of(root, ident)
    if got is None:
        fail("no element with id=%s" % ident)
        return
    for p in parts:
        if p not in got:
            fail("#%s does not say %r: %r" % (ident, p, got))


def check_picture(path):
    """The promises every standalone SVG keeps. Returns its root, or None."""
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        fail("%s is not well-formed XML: %s" % (path, e))
        return None
    if root.tag != SVG + "svg":
        fail("the root is %s, not an SVG <svg>" % root.tag)
        return None
    if root.get("version") != "1.1":
        fail("the root's version is %r, not 1.1" % root.get("version"))
    try:
        w, h = float(root.get("width")), float(root.get("height"))
    except (TypeError, ValueError):
        fail("the root has no numeric width and height")
        return root
    if root.get("viewBox") != "0 0 %g %g" % (w, h):
        fail("viewBox %r is not the picture's size %gx%g" % (root.get("viewBox"), w, h))
    if not root.get("font-family", "").endswith("sans-serif"):
        fail("the font is not the system's: %r" % root.get("font-family"))
    title, desc = root.find(SVG + "title"), root.find(SVG + "desc")
    if title is None or "lms timeline" not in (title.text or ""):
        fail("no <title> naming the timeline")
    if desc is None or "lms-report" not in (desc.text or ""):
        fail("no <desc> saying lms-report wrote it")
    drawn = [e for e in root if e.tag not in (SVG + "title", SVG + "desc")]
    if not drawn or drawn[0].tag != SVG + "rect" or drawn[0].get("fill") != "#fff" \
            or drawn[0].get("width") != "100%":
        fail("the first thing drawn is not a white background")
    for e in root.iter():
        name = e.tag.replace(SVG, "")
        if name in ("script", "style", "a", "image", "foreignObject", "use", "iframe"):
            fail("a <%s> element" % name)
        for k, v in e.attrib.items():
            if "href" in k or k.startswith("on") or "url(" in v or "javascript:" in v:
                fail("<%s %s=%r>: a link, script or fetch" % (name, k, v))
        if "font-size" in e.attrib and float(e.get("font-size")) < 10:
            fail("<%s> with font-size %s: too small to read" % (name, e.get("font-size")))
        if name == "text" and e.get("transform") is None:
            x, y = float(e.get("x", 0)), float(e.get("y", 0))
            if not (0 <= x <= w and 0 <= y <= h):
                fail("text %r at (%g, %g), outside the %gx%g picture"
                     % ("".join(e.itertext()), x, y, w, h))
    for chart, unit in (("chart-memory", "MB"), ("chart-link", "GB/s"), ("chart-strip", None)):
        g = [e for e in root.iter(SVG + "g") if e.get("id") == chart]
        if not g:
            fail("no chart %s" % chart)
            continue
        texts = ["".join(t.itertext()) for t in g[0].iter(SVG + "text")]
        bold = [t for t in g[0].iter(SVG + "text") if t.get("font-weight") == "bold"]
        if not bold:
            fail("%s has no title" % chart)
        if not any(t.startswith("time (") for t in texts):
            fail("%s has no time axis label" % chart)
        if unit is not None and unit not in texts:
            fail("%s has no value axis label %r" % (chart, unit))
    return root


def main():
    report, fixtures, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)

    # a finished run
    out = os.path.join(work, "finished.svg")
    p = run(report, os.path.join(fixtures, "finished.json"), "--svg", "-o", out,
            "--caption", "made by report_svg_test")
    if p.returncode != 0 or p.stdout.strip() != out:
        fail("lms-report --svg exited %d, printed %r: %s" % (p.returncode, p.stdout, p.stderr))
    else:
        root = check_picture(out)
        if root is not None:
            expect_text(root, "run-title", "finished.json")
            expect_text(root, "run-machine", "backend sim", "device sim <test> & co",
                        "link 12.00 GB/s (sim throttle)")
            expect_text(root, "run-limits", "device limit 64 MiB", "host limit 256 MiB",
                        "2 iterations in 100.00 ms", "finished")
            expect_text(root, "run-caption", "made by report_svg_test")

    # the same run cut after its first iteration mark (line 21): no otherData
    with open(os.path.join(fixtures, "finished.json")) as f:
        lines = f.readlines()[:21]
    cut = os.path.join(work, "cut.json")
    with open(cut, "w") as f:
        f.writelines(lines)
    p = run(report, cut, "--svg")
    out = os.path.join(work, "cut.svg")
    if p.returncode != 0 or p.stdout.strip() != out:
        fail("lms-report --svg on a cut run exited %d, printed %r: %s"
             % (p.returncode, p.stdout, p.stderr))
    else:
        root = check_picture(out)
        if root is not None:
            expect_text(root, "run-machine", "backend sim", "device unknown")
            expect_text(root, "run-limits", "device limit unknown", "the run did not finish")
            if text_of(root, "run-caption") is not None:
                fail("a caption without --caption")

    p = run(report, os.path.join(fixtures, "finished.json"), "--caption", "x", "-o",
            os.path.join(work, "refused.html"))
    if p.returncode != 2 or os.path.exists(os.path.join(work, "refused.html")):
        fail("--caption without --svg: exit status %d, not 2 (or a page written)" % p.returncode)

    if failures:
        print("%d failures" % len(failures))
        return 1
    print("lms-report --svg: every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
