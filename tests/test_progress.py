"""`Progress` in a real kernel: papermill executes a notebook that counts to 40; the saved notebook holds one
panel in its final state (static HTML with a text twin, no widget, no stream output), and the kernel process's
own stderr, papermill's log, holds the throttled and forced log lines."""
import json, subprocess, sys
import nbformat

SRC = '''from letter8_tokenizer.progress import Progress
p = Progress(40, 3600, unit='texts')
for i in range(1, 41): p.update(texts=i, loss=1 / i, force=i == 40)'''

def test_saved_notebook_keeps_one_final_panel_and_the_log_gets_lines(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(SRC)])
    nb.metadata['kernelspec'] = {'name': 'python3', 'display_name': 'Python 3', 'language': 'python'}
    src, out = tmp_path/'in.ipynb', tmp_path/'out.ipynb'
    nbformat.write(nb, src)
    r = subprocess.run([sys.executable, '-m', 'papermill', str(src), str(out), '--no-progress-bar', '-k', 'python3'],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    outs = nbformat.read(out, as_version=4).cells[0].outputs
    assert [o.output_type for o in outs] == ['display_data'], outs  # one display, no printed lines in the notebook
    html, text = outs[0].data['text/html'], outs[0].data['text/plain']
    assert '<b>texts 40 / 40 (100.0%)</b>' in html and 'width:100.0%' in html, html
    assert text.startswith('texts 40/40 loss=0.025 (in '), text
    assert 'widget' not in json.dumps(outs)
    lines = [l for l in r.stderr.splitlines() if l.startswith('texts ')]
    assert len(lines) == 2 and lines[0].startswith('texts 1/40 loss=1.0 (') and lines[1].startswith('texts 40/40'), r.stderr[-2000:]
