"""Realistic paragraphs the engine tests read (written for these tests, in the style of encyclopedia
and library documentation pages)."""

from research_tool.models.entities import SourceResult

KISS_AND_TELL = (
    "Kiss and Tell is a 1945 American comedy film starring then 17-year-old Shirley Temple as Corliss Archer. "
    "In the film, two teenage girls cause their respective parents much concern when they start to become "
    "interested in boys. The parents' bickering about which girl is the worse influence causes more problems "
    "than it solves."
)
SHIRLEY_TEMPLE = (
    "Shirley Temple Black (April 23, 1928 – February 10, 2014) was an American actress, singer, dancer, "
    "businesswoman, and diplomat who was Hollywood's number one box-office draw as a child actress from 1935 "
    "to 1938. As an adult, she was named United States ambassador to Ghana and to Czechoslovakia, and also "
    "served as Chief of Protocol of the United States. She began her film career in 1932 at the age of three."
)
CORLISS_ARCHER_RADIO = (
    "Meet Corliss Archer is an American radio sitcom that ran on CBS from 1943 to 1956. The program was "
    "created by F. Hugh Herbert and featured Priscilla Lyon, Lugene Sanders and Janet Waldo as Corliss. "
    "It was later adapted for television in 1951."
)
SUBPROCESS_DOC = (
    "subprocess.run(args, *, stdin=None, input=None, capture_output=False, timeout=None, check=False)\n"
    "    Run the command described by args. Wait for the command to complete, then return a\n"
    "    CompletedProcess instance.\n\n"
    "    If the timeout expires, the child process will be killed and waited for. The TimeoutExpired\n"
    "    exception will be re-raised after the child process has terminated.\n\n"
    "    If check is true, and the process exits with a non-zero exit code, a CalledProcessError\n"
    "    exception will be raised. Attributes of that exception hold the arguments, the exit code, and\n"
    "    stdout and stderr if they were captured.\n"
)
SUBPROCESS_MIRROR = (
    "Notes on Python's subprocess module. If the timeout expires, the child process will be killed and "
    "waited for. The run() function was added in Python 3.5 and is the recommended approach for most uses."
)


def source(url: str, title: str, text: str, name: str = "local", query: str | None = None) -> SourceResult:
    return SourceResult(url=url, title=title, full_content=text, source_name=name, query=query)
