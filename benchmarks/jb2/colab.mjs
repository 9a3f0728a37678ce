// A link that opens the chapter in Colab, at the top of every notebook page of the Jupyter Book 2 spike.
// Jupyter Book 2 has no Colab launch button; this transform adds the link without touching the notebooks.
// The repository URL and the release tag are read from the repository's _config.yml, the one place they live.
import { readFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const CONFIG = readFileSync(join(ROOT, '_config.yml'), 'utf8');
const REPOSITORY = CONFIG.match(/^repository:\n(?:[ \t].*\n)*?[ \t]+url:\s*(\S+)/m)[1];
const BRANCH = CONFIG.match(/^repository:\n(?:[ \t].*\n)*?[ \t]+branch:\s*(\S+)/m)[1];
const OWNER_REPO = REPOSITORY.replace(/^https:\/\/github\.com\//, '');

const colabLink = {
  name: 'colab-link',
  doc: 'Puts an "Open in Colab" link, to the release the book was built from, at the top of each notebook page.',
  stage: 'document',
  plugin: () => (tree, vfile) => {
    const path = vfile.path || '';
    if (!path.endsWith('.ipynb')) return;
    const url = `https://colab.research.google.com/github/${OWNER_REPO}/blob/${BRANCH}/book/${basename(path)}`;
    tree.children.unshift({
      type: 'block',
      children: [{
        type: 'paragraph',
        children: [{ type: 'link', url, class: 'cipherlab-colab', children: [{ type: 'text', value: 'Open this chapter in Colab' }] }],
      }],
    });
  },
};

export default { name: 'Colab link per chapter', transforms: [colabLink] };
