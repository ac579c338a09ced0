// A translation unit that keeps clang++ -O2 busy for a few seconds (templates from <regex>,
// <map>, <algorithm>, <sstream>): the clang workload of scripts/bench-size.
#include <algorithm>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
    std::map<std::string, std::vector<int>> m;
    std::regex re("([a-z]+)=([0-9]+)");
    std::string s = argc > 1 ? argv[1] : "a=1 b=2";
    for (auto it = std::sregex_iterator(s.begin(), s.end(), re); it != std::sregex_iterator(); ++it)
        m[(*it)[1]].push_back(std::stoi((*it)[2]));
    std::ostringstream o;
    for (auto& kv : m) {
        std::sort(kv.second.begin(), kv.second.end());
        o << kv.first << kv.second.size();
    }
    std::wregex wre(L"[[:alpha:]]+");
    std::wstring w(L"abc def");
    return static_cast<int>(o.str().size() + std::regex_search(w, wre));
}
