"""Where an added import goes when the import it replaces was the module's only one."""

from portlayer.migrate.engine import migrate_source


def test_an_added_import_takes_the_place_of_the_removed_one_above_the_blank_lines():
    source = "import torch\n\n\ndef step():\n    torch.cuda.synchronize()\n"

    # `import torch` is unused after the rewrite and goes; the blank lines stay below the new import.
    assert migrate_source(source).code == "import portlayer\n\n\ndef step():\n    portlayer.synchronize()\n"


def test_comments_above_the_first_statement_stay_above_the_added_import():
    source = "#!/usr/bin/env python\n# training step\n\nimport torch\n\n\ndef step():\n    torch.cuda.synchronize()\n"

    assert migrate_source(source).code == (
        "#!/usr/bin/env python\n# training step\n\nimport portlayer\n\n\ndef step():\n    portlayer.synchronize()\n"
    )


def test_in_an_unsorted_block_the_added_import_follows_the_last_third_party_one():
    # Alphabetically `portlayer` falls between `math` and `time`, among the standard library; the
    # block keeps no order, so it goes with the third-party imports, after the last one.
    source = ("import os\nimport math\nimport time\nimport pickle\nimport numpy as np\nimport torch\n"
              "from torch.nn import functional as F\nimport argparse\n\nx = torch.zeros(1).cuda()\n")
    assert migrate_source(source).code == (
        "import os\nimport math\nimport time\nimport pickle\nimport numpy as np\nimport torch\n"
        "from torch.nn import functional as F\nimport portlayer\nimport argparse\n\n"
        "x = torch.zeros(1).to(portlayer.device())\n"
    )
