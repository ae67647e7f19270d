// carb profile --mpi in a build without MPI (CARB_MPI=OFF).
#include "carb/campaign.hpp"
#include "carb/error.hpp"

namespace carb {

CampaignSummary run_mpi_campaign(const std::vector<Config>&, const CampaignOptions&,
                                 const std::function<void(const CampaignProgress&)>&) {
  throw Error(ErrorCategory::kUsage,
              "this carb was built without MPI; rebuild with -DCARB_MPI=ON (Debian: "
              "libopenmpi-dev)",
              "mpi");
}

}  // namespace carb
