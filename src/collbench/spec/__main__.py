"""python -m collbench.spec > docs/spec.schema.json"""

import sys

from collbench.spec import spec_json_schema_text

sys.stdout.write(spec_json_schema_text())
